"""The console at `/ui`: server-rendered pages over the worker's own HTTP API.

Every page and action goes through the API in-process, with the signed-in principal's token, so
the console answers and refuses exactly as the API does, and audits the same way.
"""
