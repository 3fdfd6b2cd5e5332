"""The query service: Flask app factory, identity, routes, continue tokens, OpenAPI document and
gunicorn config. Answers lists from Redis only. Imports `common`, never `collector`."""
