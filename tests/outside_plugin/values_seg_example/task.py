import numpy as np
from scipy.stats import spearmanr

from values_seg import hookimpl, Task, Metric, row


class RiskCorrelation(Task):
    """Spearman's rank correlation of the aggregated uncertainty with the risk 1 - Dice, i.i.d. and OoD."""

    name = "risk_correlation"
    label = "Risk corr."
    metrics = (Metric("spearman", "higher", "Spearman ρ", primary=True),)
    uncertainty_types = ("PU", "AU", "EU")
    consumes = ("dice",)  # the per-case quantity it reads (the risk 1 - Dice)

    def score(self, result):
        out = []
        for (measure, aggregation), rows in result.test_scores().groupby(["measure", "aggregation"]):
            ood = rows["ood"].to_numpy(bool)
            for subset, part in (("iid", rows[~ood]), ("ood", rows[ood])):
                risk, uncertainty = 1 - part["dice"].to_numpy(float), part["score"].to_numpy(float)
                if len(part) > 2 and np.ptp(risk) > 0 and np.ptp(uncertainty) > 0:
                    rho = spearmanr(uncertainty, risk).statistic
                    out.append(row(self.name, "spearman", subset, rho, measure, aggregation))
        return out


@hookimpl
def values_seg_tasks():
    return [RiskCorrelation]
