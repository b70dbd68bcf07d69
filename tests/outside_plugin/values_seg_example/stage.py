from values_seg import hookimpl, Task, Metric, row, Stage


def case_count(case_ids):
    """A job on the run's executor (module level, picklable arguments)."""
    return len(set(case_ids))


class CountCases(Stage):
    """Counts each combination's scored test cases in a job of its own."""

    name = "count_cases"
    consumes = ("dice",)

    def run(self, context, tasks):
        jobs = {c.name: (case_count, (list(context.load(c).test_cases()["case_id"]),)) for c in context.combinations}
        return context.map(self.name, jobs)


class CaseCount(Task):
    """The number of test cases each combination was scored on, from the count_cases stage."""

    name = "case_count"
    label = "Cases"
    metrics = (Metric("cases", "higher", "Test cases", splits=("all",), per_measure=False, per_aggregation=False),)
    stages = (CountCases,)

    def score(self, result):
        count = result.stages.get("count_cases")
        return [] if count is None else [row(self.name, "cases", "all", count)]


@hookimpl
def values_seg_tasks():
    return [CaseCount]
