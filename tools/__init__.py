"""This project's maintainer tools, run from the checkout's root as
`python -m tools.<module>` (the Makefile's targets do), with a python that
imports torchpatch: a release venv's, which has it installed, or the
machine's with `PYTHONPATH=src` (the Makefile's TOOL).

prove (with teeth) proves a series on the torch of a venv; demo and pr show
the fix's before and after (reproducer); apply_check, upstream_test,
upstream_lint, registry_lint and typecheck hold the series to PyTorch's own
tests and checks; bench measures its cost in Dynamo tracing; rebase (with
pins) carries a series to another release; release_table and carried_tests
keep the records the repository carries in step. run runs torchpatch and
pytest for all of them; paths says where the checkout keeps things.
"""
