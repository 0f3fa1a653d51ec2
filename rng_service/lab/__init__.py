"""The statistical battery, the simulator and PAR report rendering."""

#: the modules meant for use outside this package (all of them)
__all__ = ["par_report", "simulator", "stats", "theoretical"]
