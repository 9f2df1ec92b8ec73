"""What reads finished run directories: runs, reports, seed groups, sweeps and running one here."""
