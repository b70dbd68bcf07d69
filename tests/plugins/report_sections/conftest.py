"""The synthetic run directory of the report tests (tests/values_seg/report/conftest.py), shared here."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "report_conftest", Path(__file__).parents[2] / "values_seg" / "report" / "conftest.py")
_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_report)

synthetic_run, built_report, spec, results_frame, expected_answers = (
    _report.synthetic_run, _report.built_report, _report.spec, _report.results_frame, _report.expected_answers)
write_synthetic_run, write_stats_run = _report.write_synthetic_run, _report.write_stats_run
