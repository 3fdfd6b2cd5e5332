"""`fleetscope mcp`: a Model Context Protocol server over the HTTP API, as the caller.

A client of `/api/v1` read routes only, with the CLI's configuration and credentials
(fleetscope.client), so an assistant never sees more than its user; it never imports server
code, Redis or the Kubernetes client (an import-linter contract keeps it so).
"""
