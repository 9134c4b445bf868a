"""The pages: server-rendered HTML (Jinja2, autoescaped), a stylesheet and server-side SVG charts.

``pages_router`` is what ``tracker.surfaces.api.create_app`` includes; ``tracker demo``
(:mod:`tracker.surfaces.web.demo`) serves them over a scripted history on the Hub stand-in.
"""

from tracker.surfaces.web.routes import install_site, pages_router

__all__ = ["install_site", "pages_router"]
