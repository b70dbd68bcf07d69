"""The outside task's own report section: the sample agreement (``sample_agreement`` rows) per
prediction model, i.i.d. beside OoD, as a table and a figure."""

from values_seg import hookimpl, ReportSection
from values_seg.report import markdown
from values_seg.report.common import metric_rows

from values_seg_example.quantity import SampleAgreement

METRIC = SampleAgreement.metrics[0]


def plot_agreement(means, path):
    """Bars of the mean sample Dice per prediction model, one bar per split."""
    import numpy as np
    from values_seg.report.plots._style import new_figure, save

    fig = new_figure(4.5, 3)
    ax = fig.subplots()
    x, width = np.arange(len(means)), 0.8 / len(means.columns)
    for i, split in enumerate(means.columns):
        ax.bar(x + (i - (len(means.columns) - 1) / 2) * width, means[split], width, label=split)
    ax.set_xticks(x, means.index)
    ax.set_ylim(0, 1.2)
    ax.set_ylabel(f"mean {METRIC.label}")
    ax.legend(fontsize=8, loc="upper center", ncols=len(means.columns))
    return save(fig, path)


def agreement_rows(run):
    """The outside task's rows, found through the run's declarations (its label in this run)."""
    return metric_rows(run.results, run.spec.task_labels(SampleAgreement.name), METRIC.name)


class SampleAgreementFigure(ReportSection):
    """Sample agreement: how much a model's samples agree with each other, i.i.d. and OoD."""

    name = "sample_agreement_figure"
    what = "the sample agreement"
    order = 36  # after the downstream tables
    outputs = ("figures/sample_agreement.png",)

    def applies(self, run):
        return not agreement_rows(run).empty

    def build(self, ctx):
        rows, spec = agreement_rows(ctx.run), ctx.run.spec
        means = rows.pivot_table(index="prediction_model", columns="split", values="value", aggfunc="mean")
        means.index = [spec.label("prediction_model", m) for m in means.index]
        means.columns = [spec.label("split", s) for s in means.columns]
        ctx.add("## Sample agreement", markdown.table(
            ["Prediction model", *means.columns], [[m, *(f"{v:.3f}" for v in r)] for m, r in means.iterrows()]))
        out = ctx.figures / "sample_agreement.png"
        drawn = ctx.figure(plot_agreement, out, means, out)
        ctx.later(lambda: [markdown.figure(ctx.rel(drawn.result()), "Sample agreement",
                                           f"Mean {METRIC.label} between the samples of a case, per model and split.")])


@hookimpl
def values_seg_report_sections():
    return [SampleAgreementFigure]
