"""spark_jobs"""
