"""Serving benchmark (`python -m bench.serving`): datasets, load, figures and their roofline."""
