package mcp

// ViewMIMEType is the media type of an MCP Apps view.
const ViewMIMEType = "text/html;profile=mcp-app"

const appsExtension = "io.modelcontextprotocol/ui"

// A View is an approved ui:// view of the MCP Apps extension. Only views
// listed in [Options.Views] are published, and a result naming any other
// view fails with [CodeInvalidResult].
type View struct {
	// URI is the view's ui:// address.
	URI string
	// Name labels it in resources/list.
	Name string
	// HTML is the document the host renders in a sandbox.
	HTML string
	// CSP lists the origins the view may reach, as the Apps extension's
	// _meta.ui.csp object. Nil allows none.
	CSP map[string]any
}
