"""The engine as a service: an HTTP API with a web page, and an MCP server for agents.

    service.py    GraphService: readers over the last commit, one writer, write jobs
    jobs.py       the job queue (one write at a time, in the background, cancellable), kept across restarts
    doc_status.py each document's status (queued ... indexed, failed, cancelled), kept in the working dir
    input_folder.py  what a document job runs (its parts), and the input folder's scan
    workspaces.py the X-Workspace header: a working dir (and database workspace) per name
    app.py        the HTTP API (FastAPI), ``serve``
    mcp_tools.py  the MCP tools, ``run_mcp`` (stdio or streamable HTTP)
    security.py   binding, Host/Origin and API-key rules, request size limits, security headers
    errors.py     the engine's errors as HTTP statuses and JSON bodies
    static/       the web page and the API docs' page (plain HTML, JS and CSS; no network needed)

Needs the ``server`` extra: ``pip install "filegraphrag[server]"``.
"""

# Open named workspaces a server keeps at most (each holds its stores and readers in memory);
# here, not in workspaces.py, so the CLI's options name it without importing the server.
DEFAULT_MAX_OPEN_WORKSPACES = 16
