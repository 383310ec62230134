"""Speed/memory benchmarks, each printing ratios against a same-run reference."""
