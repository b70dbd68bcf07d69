"""Preparation and reading of real data sets, one subpackage each."""
