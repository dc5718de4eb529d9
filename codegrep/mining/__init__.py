"""mining"""
