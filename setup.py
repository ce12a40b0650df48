"""Packaging detail that pyproject.toml cannot express: the top-level ``schemes/`` folder (where
users and developers read and add scheme files) is shipped inside the wheel as the package data
folder ``refinterp/schemes_data/``.  All metadata lives in pyproject.toml."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["refinterp", "refinterp.*"]) + ["refinterp.schemes_data"],
      package_dir={"refinterp.schemes_data": "schemes"})
