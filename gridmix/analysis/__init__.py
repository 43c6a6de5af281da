"""The analyses every track goes through, one module each.

- :mod:`~gridmix.analysis.stats`: paired-seed statistics, numbers only (sign-flip test, its inverted
  interval, its MDE, Holm);
- :mod:`~gridmix.analysis.verdicts`: every rule that turns those numbers into words (α, the
  families, the practical threshold, identical arms, the Holm floor, the floor/ceiling bands, the
  verdict strings), for every comparison;
- :mod:`~gridmix.analysis.references`: the references a reviewer tries first, on every comparison
  seed's own split (is the model beating them?), fitted by :mod:`~gridmix.analysis.probes` (ridge,
  logistic probe, 1-NN);
- :mod:`~gridmix.analysis.parity`: are the compared models of the same size?;
- :mod:`~gridmix.analysis.idea_mechanism`: the idea mixer's own analysis of every trained idea
  model;
- :mod:`~gridmix.analysis.measure` and :mod:`~gridmix.analysis.scaling`: time, FLOPs and memory of a
  training step against the grid size; :mod:`~gridmix.analysis.causal_scaling`: the operator-level
  causal tracks it times.

Their figures are drawn by :mod:`gridmix.report.plots`.
"""
