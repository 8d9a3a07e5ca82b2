"""dpaudit audit: statistics with honest confidence, the comparator, reports and the CLI."""
