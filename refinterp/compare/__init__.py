"""Layer-by-layer comparison of a model run (under a scheme) against a device dump.

align.py (names, layout, samples, integer vs float) -> metrics.py (per tensor numbers) ->
policy.py (pass/fail) -> engine.py (reference + local re-runs, first divergence) -> report_*.py.
"""
