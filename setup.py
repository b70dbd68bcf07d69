"""Package discovery: the folder plugins/ installs as the package values_seg_plugins."""

from setuptools import find_packages, setup

packages = find_packages(include=["values_seg", "values_seg.*", "toy_data_generator", "toy_data_generator.*"])
packages += ["values_seg_plugins" + p[len("plugins"):] for p in find_packages(include=["plugins", "plugins.*"])]

setup(packages=packages, package_dir={"values_seg_plugins": "plugins"})
