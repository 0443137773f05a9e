"""A server with MCP Apps (the extension ``io.modelcontextprotocol/ui``), written with the
official Python SDK (``mcp==2.3.0``, its ``mcp.server.apps``), served on stdio.

What it offers:

* the app *dashboard*: its entry tool ``show_dashboard`` ("dashboard shown"; ``_meta.ui.resourceUri``
  ``ui://dashboard/view.html``) and two app-only tools of its view (``_meta.ui.visibility``
  ``["app"]``, the same ``resourceUri``): ``refresh_dashboard`` ("dashboard refreshed") and
  ``export_dashboard`` ("dashboard exported");
* the app *chart*: its entry tool ``show_chart`` ("chart shown", ``ui://chart/view.html``)
  and its app-only tool ``zoom_chart`` ("chart zoomed");
* the plain tool ``echo {text}``;
* the views ``ui://dashboard/view.html`` and ``ui://chart/view.html``
  (``text/html;profile=mcp-app``), and ``ui://dashboard/{part}``, a template: a view read
  through it, such as ``ui://dashboard/help.html``, is in no ``resources/list``, as the
  extension allows.

The process ends at the end of its stdin.
"""

from __future__ import annotations

from mcp.server.apps import Apps
from mcp.server.mcpserver import MCPServer

DASHBOARD = "ui://dashboard/view.html"
CHART = "ui://chart/view.html"


def view(title: str) -> str:
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{title}</body></html>"


apps = Apps()


@apps.tool(resource_uri=DASHBOARD, description="Show the dashboard")
def show_dashboard() -> str:
    return "dashboard shown"


@apps.tool(resource_uri=DASHBOARD, visibility=["app"], description="Refresh the data of the dashboard")
def refresh_dashboard() -> str:
    return "dashboard refreshed"


@apps.tool(resource_uri=DASHBOARD, visibility=["app"], description="Export the dashboard")
def export_dashboard() -> str:
    return "dashboard exported"


@apps.tool(resource_uri=CHART, description="Show the chart")
def show_chart() -> str:
    return "chart shown"


@apps.tool(resource_uri=CHART, visibility=["app"], description="Zoom the chart")
def zoom_chart() -> str:
    return "chart zoomed"


apps.add_html_resource(DASHBOARD, view("Dashboard"), name="dashboard")
apps.add_html_resource(CHART, view("Chart"), name="chart")

server = MCPServer("py-apps-peer", extensions=[apps])


@server.tool(description="Send the text back")
def echo(text: str) -> str:
    return text


@server.resource("ui://dashboard/{part}", mime_type="text/html;profile=mcp-app")
def dashboard_part(part: str) -> str:
    return view(f"Dashboard {part}")


if __name__ == "__main__":
    server.run("stdio")
