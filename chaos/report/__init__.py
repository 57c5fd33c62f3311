"""Renderings of a finished run: journal.json and junit.xml, the terminal verdict, the HTML report and
its timeline, and the baseline gate that compares a run's figures with known-good runs.
"""
