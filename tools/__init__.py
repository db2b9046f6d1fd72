"""This project's maintainer tools, each a job run from the checkout as
`python -m tools.<module>` (the Makefile's targets), all on plumbing.py.
"""
