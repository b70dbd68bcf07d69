"""An outside report section: mean Dice per prediction model and scenario, as a table and a figure."""

from values_seg import hookimpl, ReportSection
from values_seg.report import markdown


def plot_dice(means, path):
    """Bars of the mean Dice per (scenario, prediction model)."""
    from values_seg.report.plots._style import new_figure, save

    fig = new_figure(4, 3)
    ax = fig.subplots()
    ax.bar([f"{s}\n{m}" for s, m in means.index], means.to_numpy())
    ax.set_ylabel("mean Dice")
    return save(fig, path)


class DiceOverview(ReportSection):
    """Dice overview: the mean Dice of each prediction model per scenario."""

    name = "dice_overview"
    what = "the Dice overview"
    order = 35  # after the downstream tables
    outputs = ("figures/dice_overview.png",)

    def applies(self, run):
        return (run.results["metric"] == "dice").any()

    def build(self, ctx):
        rows = ctx.run.results[ctx.run.results["metric"] == "dice"]
        means = rows.groupby(["scenario", "prediction_model"])["value"].mean()
        ctx.add("## Dice overview", markdown.table(["Scenario", "Prediction model", "Dice"],
                                                   [[s, m, f"{v:.3f}"] for (s, m), v in means.items()]))
        out = ctx.figures / "dice_overview.png"
        drawn = ctx.figure(plot_dice, out, means, out)
        ctx.later(lambda: [markdown.figure(ctx.rel(drawn.result()), "Dice overview", "Mean Dice per model.")])


@hookimpl
def values_seg_report_sections():
    return [DiceOverview]
