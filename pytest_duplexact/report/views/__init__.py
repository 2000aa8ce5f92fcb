"""The report's views, each reading the typed ``Report`` and the shared cells of ``rows``:
the terminal tables, Markdown, the HTML page with its charts and lanes, the comparison page,
the GitHub job summary, and the commands that show stored reports (``duplexact report``,
``duplexact compare``)."""
