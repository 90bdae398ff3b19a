"""Calibration against human labels: exact threshold fitting, cross-validated agreement with
cluster-bootstrap intervals, annotator statistics, preference-pair accuracy, static reports."""
