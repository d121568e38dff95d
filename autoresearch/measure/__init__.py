"""Measuring: a metric command's value and its judgement against a target, the files a
measurement is made of, and the judge panel's votes on a goal in words."""
