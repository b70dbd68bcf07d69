"""Hook specifications: one hook per kind of component, each returning a list of components.

How a plugin is registered and what a component declares: docs/design-rationale.md,
"Hook specifications"; complete, tested examples of every kind: docs/guides/add-component.md.
"""

from __future__ import annotations

import pluggy

PROJECT = "values_seg"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def values_seg_backbones() -> list:
    """C0: factories ``(dims, in_channels, num_classes, dropout=0.0, **params) -> torch.nn.Module``.

    The engine supplies the first four (:data:`SUPPLIED_ARGS`); the others are the backbone's
    parameters. With ``dropout > 0`` the network must contain dropout layers (test-time dropout
    switches them on at inference). Initialise from torch's global RNG (the engine seeds it).
    """


@hookspec
def values_seg_prediction_models() -> list:
    """C1: :class:`values_seg.components.prediction_model.PredictionModel` subclasses.

    A model declares its ``family`` (:data:`values_seg.families.FAMILIES`), the trainings it needs
    (``training_specs(base)``, deduplicated across the sweep), and turns the trained networks and
    one image into probability samples ``[S, C, *spatial]`` (``predict``). A model with its own
    output head and loss puts a :class:`values_seg.engine.head.Head` into its specs.
    """


@hookspec
def values_seg_measures() -> list:
    """C2: callables ``samples [S, C, *spatial] -> map [*spatial]`` (higher = more uncertain).

    Declare ``uncertainty_types`` (C1 family -> "PU" / "AU" / "EU") with
    :func:`values_seg.component` or write the measure against the shared per-case statistics
    with :func:`values_seg.components.measure.measure`. A measure runs only under the families it declares
    a type for (no rows under the others; the run names each gap at its start and in its
    summary); an undeclared measure is scored under every family but stays out of type-filtered
    tasks (active learning, the separation study).
    """


@hookspec
def values_seg_aggregations() -> list:
    """C3: :class:`values_seg.components.aggregation.Aggregation` subclasses: ``fit(val_maps, val_predictions)``
    returning ``self``, then ``agg(umap) -> float`` (``agg(umap, prediction=labels)`` where the
    class declares ``needs_prediction = True``)."""


@hookspec
def values_seg_datasets() -> list:
    """Datasets: :class:`values_seg.components.dataset.Dataset` subclasses (``case_ids(split)``, ``load(case_id) ->
    Case``; ``meta["ood"]`` and ``meta["shift"]`` mark shifted cases)."""


@hookspec
def values_seg_tasks() -> list:
    """Downstream tasks: :class:`values_seg.components.task.Task` subclasses that declare their metrics
    (:class:`values_seg.components.task.Metric`), suited uncertainty types, the per-case quantities they
    ``consume`` and the extra ``stages`` they need (:class:`values_seg.components.stage.Stage`), and turn an
    :class:`values_seg.components.task.EvaluationResult` into metric rows. A task may also define
    ``curves(result) -> pandas.DataFrame``: the points its metrics integrate (a ``curve`` column
    names the kind, e.g. "risk_coverage"), which the runner writes to ``curves.parquet`` with the
    combination's context, for report sections to draw without computing anything again."""


@hookspec
def values_seg_report_sections() -> list:
    """Report sections: :class:`values_seg.report.section.ReportSection` subclasses.

    Called when the registry loads; ``values-seg report`` (and ``values-seg run`` at its end)
    then creates one instance of every section (no arguments), keeps those whose
    ``applies(run)`` is true, calls ``prepare(ctx)`` on each, then ``build(ctx)`` (sections with
    an ``early`` number first), and places their blocks in ``order``. A section may read the
    loaded run (``ctx.run``, :class:`values_seg.report.rundir.RunData`: ``results``, ``spec``
    from components.json, ``distributions``, ``cases``, ``curve(kind)`` from curves.parquet,
    ``montages``, ``config``) and adds Markdown blocks with ``ctx.add`` (``ctx.later`` for blocks
    that wait for figures). Figures are queued with ``ctx.figure(plot, out, ...)`` (drawn in
    worker processes, kept when nothing changed); table files are written with
    ``ctx.write_text`` / ``ctx.write_csv`` (atomic, never through a link). It returns nothing,
    and names the files it writes in ``outputs`` so that stale ones are removed. An exception in
    a section becomes a warning in its place; the rest of the report is built.
    """


@hookspec
def values_seg_cli(commands, data_commands) -> None:
    """Command-line subcommands a plugin contributes (not a kind of component: returns nothing).

    Called once when ``values-seg`` builds its parser for a command that is not one of the
    core's (``run``, ``report``, ``compare``, ``plugins``) or for its full help; only plugins
    found without a config (built-ins and entry points) take part. ``commands`` are the
    sub-parsers of ``values-seg``, ``data_commands`` those of ``values-seg data`` (data set
    utilities); declare only the arguments you use. Add a parser and its command::

        p = data_commands.add_parser("my-data", help="prepare my data set")
        p.set_defaults(func=my_command)  # my_command(args) -> exit code

    A ``ValueError`` or ``FileNotFoundError`` the command raises is printed as one line. A name
    that is taken is an error naming the plugin. Import heavy modules in the command, not here.
    """


@hookspec
def values_seg_quantities() -> list:
    """Per-case quantities: :class:`values_seg.components.quantity.Quantity` subclasses (no parameters; the
    ``evaluation`` settings reach them as ``case.settings``).

    When: inside the fused evaluation of a combination, once per test case (``compute``) and, for a
    quantity with a validation part, once per validation case (``fit_case``, then ``fit`` on the
    merged summaries) -- only when a task of the sweep (or one of its stages) names the quantity in
    ``consumes``. What it may read: the inputs it declares in ``needs``
    (:data:`values_seg.components.quantity.NEEDS`: samples, maps, prediction, references, meta) through a
    :class:`values_seg.components.quantity.CaseView`, which refuses anything undeclared; plus ``case_id``,
    ``num_classes``, ``ignore_index``, ``background`` and ``settings``. What it returns: a float per
    case, or with ``per_measure`` one value per measure in ``case.measures`` order (with ``payload``
    any object, stored by its ``save`` and read back by its ``load``). It must not keep state across
    cases: everything it learns from validation goes through ``fit_case``/``fit``.
    """


@hookspec
def values_seg_trackers() -> list:
    """Experiment trackers: :class:`values_seg.components.tracker.Tracker` subclasses (MLflow, TensorBoard, ...),
    configured in the config's ``tracking.<name>`` section (their constructor's keyword arguments).
    The runner logs to them after the run, in its own process (never a worker): one record per
    training and per combination under one record of the sweep, each keyed by its cache key."""


#: Factory arguments the engine supplies itself, per kind (not settable from a config).
SUPPLIED_ARGS = {"backbone": ("dims", "in_channels", "num_classes", "dropout")}

#: kind name -> hook name; the order is the order of ``values-seg plugins``.
HOOKS = {
    "backbone": "values_seg_backbones",
    "prediction_model": "values_seg_prediction_models",
    "measure": "values_seg_measures",
    "aggregation": "values_seg_aggregations",
    "dataset": "values_seg_datasets",
    "task": "values_seg_tasks",
    "quantity": "values_seg_quantities",
    "report_section": "values_seg_report_sections",
    "tracker": "values_seg_trackers",
}
