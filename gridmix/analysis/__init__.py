"""The analyses every track goes through, one module each.

- :mod:`~gridmix.analysis.stats`: paired-seed statistics (sign-flip test, its MDE, Holm, verdicts);
- :mod:`~gridmix.analysis.references`: naive references on the same test split (is the model beating them?);
- :mod:`~gridmix.analysis.parity`: are the compared models of the same size?;
- :mod:`~gridmix.analysis.mechanism`: the idea mixer's own analysis of every trained idea model;
- :mod:`~gridmix.analysis.measure` and :mod:`~gridmix.analysis.scaling`: time, FLOPs and memory of a training
  step against the grid size; :mod:`~gridmix.analysis.causal_scaling`: the operator-level causal tracks it times.

Their figures are drawn by :mod:`gridmix.report.plots`.
"""
