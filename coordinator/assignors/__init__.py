"""coordinator/assignors"""
