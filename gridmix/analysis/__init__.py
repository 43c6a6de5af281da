"""Statistical analysis of paired-seed benchmark results."""
