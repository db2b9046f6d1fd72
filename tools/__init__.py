"""This project's maintainer tools, run from the checkout's root as
`python -m tools.<module>` (the Makefile's targets do), with a python that
imports torchpatch: a release venv's, which has it installed, or the
machine's with `PYTHONPATH=src` (the Makefile's TOOL). One module a job, all
on plumbing.py; docs/maintaining.md lists them.
"""
