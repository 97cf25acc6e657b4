// Package web is the web UI of a process: a few pages and same-origin
// JSON endpoints served over HTTP on web.listen, with every asset embedded
// in the binary (no Node.js to build or run, nothing downloaded at run
// time). The endpoints call the process in process (server.Local on the
// current API phase), so they see the same gate, limits and errors as a
// gRPC call, and no credential of the server ever reaches the browser.
//
// Pages (one HTML page, routed in the browser by path):
//
//	/             the flows page: a search query (E36) and filters (status, type, ID prefix,
//	              started since), indexed attribute columns, paging, live refresh
//	/flows/ID     the run page: step graph (subflow links, E29 cancellations), live state,
//	              timeline, actions (stop, skip a timer, publish, set an attribute, reset)
//	/node         the node page: identity, lease, role, events, log, snapshots, store requests
//
// On a process that does not serve (a standby, a process holding off
// after a step down, one still opening its store), / and /flows/... answer
// 503 with /readyz's message and a link to /node (and to web.activeURL
// when set), and the flow endpoints answer 503 with the same message; the
// node page is served by every process.
//
// JSON endpoints (protobuf messages in their canonical JSON, protojson):
//
//	GET  /api/flows?q=&status=&type=&prefix=&since=&pageToken=&pageSize=
//	GET  /api/flows/{id}?runId=           state and history of a run, and names: how the page
//	                                       shows the map instances (E33) among its attributes
//	                                       and channels, map["key"] as dexcli does
//	POST /api/flows/{id}/stop             {runId, type: cancel|terminate|fail, reason}
//	POST /api/flows/{id}/skip-timer       {runId, stepExecutionId, conditionId | timerIndex}
//	POST /api/flows/{id}/publish          {runId, channel, value (JSON text)}
//	POST /api/flows/{id}/attributes       {runId, name, value (JSON text)}
//	POST /api/flows/{id}/reset            {runId, point: beginning|stepType|stepExecution,
//	                                       stepType, stepExecutionId, beforeExecute, skipReapply, reason}
//	GET  /api/node
//	GET  /api/session, POST /api/session {token}, DELETE /api/session
//
// The flows page is one SearchFlows query (E36, docs/search.md): the
// typed query's condition AND the filters (FlowType =, FlowId
// STARTS_WITH, Status IN, StartTime >=), its ORDER BY last. So it lists
// every run, latest and older, pages with the search's page tokens, and
// has each run's indexed attribute values: the page shows one column per
// key present on it. A malformed query is reported at its positions in
// the typed text (when the joined query fails, the typed one alone is
// parsed again for its error: parsing reads no run), and the page stops
// refreshing it. The search's summaries carry no error, so the failed,
// canceled and terminated runs of a page read theirs with GetFlowSummary.
//
// The run page derives a SubFlow condition's child ID
// (SubFlow:<parent>-<stepExecution>-<index>) from the Wait, with the run
// and status of the live state or the SubFlowCompleted event, and links
// to it; a child's page links to ParentFlowId. A StepCanceled event
// marks the execution canceled (its WaitFor too when it was still
// waiting), apart from failed ones, naming the canceling execution. The
// reset action (E37) opens the new run; the header links a reset run and
// the run it was reset from. The live state's attributes and queues show
// an instance of a map (E33, "<map>/<escaped key>") by its map and key,
// map["key"] as dexcli shows it (split at the last '/', the key
// unescaped: decoded by the server, api.go instanceNames), with the wire
// name as the cell's title.
//
// # What a browser may do
//
// A browser session has the roles of the token its user signs in with,
// checked on every request with the method's permission from the server's
// table (server.Permission): reader for the pages and reads, client for
// the actions (stop, skip a timer, publish, set an attribute, reset). The node
// page needs reader, like /metrics. In open mode (no auth section and no
// admin credential) everybody may do everything, as on the gRPC API; with
// only admin.credentialFile set, everything but AdminService is open, so
// the UI is too (it never calls AdminService: the node page reads the
// process itself).
//
// With auth configured the UI asks for a token once (POST /api/session):
// it is checked with the authorizer, kept in the process's memory beside
// a random session ID, and the browser gets only that ID, in an HttpOnly,
// SameSite=Strict cookie valid for SessionTTL. The token is authenticated
// again on every request, so a token removed from the tokens file stops
// working at once; the server's own credentials are never used for a
// browser. Actions must come with the X-Dex-UI header (a cross-site form
// cannot set it) and, when the browser sends Origin, from the UI's own
// origin. The UI serves plain HTTP: bind it to loopback, or put it behind
// a TLS proxy, when tokens travel over a network.
package web
