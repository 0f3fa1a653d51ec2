"""The statistical battery, the simulator and PAR report rendering."""
