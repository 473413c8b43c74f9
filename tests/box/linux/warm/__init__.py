"""The warm box (sandbox/linux/warm/): its starter, its runs, its handles and bounds."""
