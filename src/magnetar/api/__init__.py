"""The HTTP API's request and response bodies (pydantic: validation at the boundary)."""
