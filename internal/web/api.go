package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/auth"
	"github.com/dexzd/dexzd/internal/engine"
)

// Bounds of one request of the UI.
const (
	// maxEvents is how many history events the run page loads at most.
	maxEvents = 10_000
	// maxMessages is how many queued messages per channel the run page
	// shows.
	maxMessages = 20
	// callTimeout bounds each in-process call.
	callTimeout = 10 * time.Second
)

var marshal = protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: false}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, grpcCode, msg string) {
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, code, apiError{Code: grpcCode, Message: msg})
}

// httpStatus maps the API's codes to HTTP.
var httpStatus = map[codes.Code]int{
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.FailedPrecondition: http.StatusConflict,
	codes.Aborted:            http.StatusConflict,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.Canceled:           http.StatusRequestTimeout,
}

// writeCallError answers an API call's error with its code and message.
func writeCallError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	code, ok := httpStatus[st.Code()]
	if !ok {
		code = http.StatusInternalServerError
	}
	writeError(w, code, strings.ToUpper(st.Code().String()), st.Message())
}

// rawProto is a protobuf message in its canonical JSON inside a JSON answer.
func rawProto(m proto.Message) json.RawMessage {
	b, err := marshal.Marshal(m)
	if err != nil || len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

func callCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), callTimeout)
}

// flowsQuery is the flows page's request: the query text given to
// SearchFlows (the filters and the search field joined), and the part of
// it the user typed, whose syntax errors are reported against its own
// positions.
type flowsQuery struct {
	search *dexpb.SearchFlowsRequest
	// user is the search field's text ("" when empty).
	user string
}

// quote is s as a query literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// listQuery reads the flows page's filters and search field.
func listQuery(r *http.Request, now time.Time) (flowsQuery, error) {
	q := r.URL.Query()
	var conds []string
	if t := q.Get("type"); t != "" {
		conds = append(conds, "FlowType = "+quote(t))
	}
	if p := q.Get("prefix"); p != "" {
		conds = append(conds, "FlowId STARTS_WITH "+quote(p))
	}
	if s := q.Get("status"); s != "" {
		var names []string
		for _, name := range strings.Split(s, ",") {
			n := strings.ToUpper(strings.TrimSpace(name))
			v, ok := dexpb.FlowStatus_value["FLOW_STATUS_"+n]
			if !ok || v == 0 {
				return flowsQuery{}, status.Errorf(codes.InvalidArgument, "status: %q is not running, completed, failed, canceled or terminated", name)
			}
			names = append(names, quote(n))
		}
		conds = append(conds, "Status IN ("+strings.Join(names, ", ")+")")
	}
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			d, derr := time.ParseDuration(s)
			if derr != nil || d < 0 {
				return flowsQuery{}, status.Errorf(codes.InvalidArgument, "since: %q is neither an RFC 3339 time nor a duration such as 1h", s)
			}
			t = now.Add(-d)
		}
		conds = append(conds, "StartTime >= "+quote(t.UTC().Format(time.RFC3339Nano)))
	}
	req := &dexpb.SearchFlowsRequest{PageToken: q.Get("pageToken"), PageSize: 50}
	if s := q.Get("pageSize"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return flowsQuery{}, status.Errorf(codes.InvalidArgument, "pageSize: must be 1 to 1000, got %q", s)
		}
		req.PageSize = uint32(n)
	}
	user := strings.TrimSpace(q.Get("q"))
	where, order := splitOrderBy(user)
	if where = strings.TrimSpace(where); where != "" {
		if len(conds) > 0 {
			where = "(" + where + ")"
		}
		conds = append([]string{where}, conds...)
	}
	req.Query = strings.Join(conds, " AND ")
	if order != "" {
		req.Query = strings.TrimSpace(req.Query + " " + order)
	}
	return flowsQuery{search: req, user: user}, nil
}

// splitOrderBy splits a query at its ORDER BY clause (outside string
// literals and backquoted names), so that the filters can be joined to
// its condition.
func splitOrderBy(q string) (where, order string) {
	inStr, inName := false, false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case inStr:
			if c == '\'' {
				inStr = false // a doubled quote reopens at the next one
			}
		case inName:
			if c == '`' {
				inName = false
			}
		case c == '\'':
			inStr = true
		case c == '`':
			inName = true
		case (c == 'o' || c == 'O') && (i == 0 || !identByte(q[i-1])) && len(q) >= i+5 && strings.EqualFold(q[i:i+5], "order"):
			rest := q[i+5:]
			trimmed := strings.TrimLeft(rest, " \t\r\n")
			if len(trimmed) < len(rest) && len(trimmed) >= 2 && strings.EqualFold(trimmed[:2], "by") && (len(trimmed) == 2 || !identByte(trimmed[2])) {
				return q[:i], q[i:]
			}
		}
	}
	return q, ""
}

func identByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// closedStatuses are the statuses whose summary has an error to show.
var closedStatuses = map[dexpb.FlowStatus]bool{
	dexpb.FlowStatus_FLOW_STATUS_FAILED:     true,
	dexpb.FlowStatus_FLOW_STATUS_CANCELED:   true,
	dexpb.FlowStatus_FLOW_STATUS_TERMINATED: true,
}

// listFlows answers the flows page with SearchFlows (E36): the filters
// and the search field are one query, so paging, ORDER BY and the
// indexed attributes of each run come from the search.
func (s *Server) listFlows(w http.ResponseWriter, r *http.Request) {
	api, ok := s.authorize(w, r, dexpb.FlowService_SearchFlows_FullMethodName)
	if !ok {
		return
	}
	if _, ok := s.authorize(w, r, dexpb.FlowService_GetFlowSummary_FullMethodName); !ok {
		return
	}
	fq, err := listQuery(r, time.Now())
	if err != nil {
		writeCallError(w, err)
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	resp, err := api.SearchFlows(ctx, fq.search)
	if err != nil {
		if status.Code(err) == codes.InvalidArgument && fq.user != "" && fq.user != fq.search.GetQuery() {
			// Report an error of the typed query at its own positions:
			// parsing fails before any run is read.
			if _, uerr := api.SearchFlows(ctx, &dexpb.SearchFlowsRequest{Query: fq.user, PageSize: 1}); status.Code(uerr) == codes.InvalidArgument {
				err = uerr
			}
		}
		writeCallError(w, err)
		return
	}
	// The search's summaries carry no error: the failed, canceled and
	// terminated runs of the page read theirs (one in-process call each,
	// at most a page).
	flows := make([]map[string]any, 0, len(resp.GetFlows()))
	for _, f := range resp.GetFlows() {
		sum := f.GetSummary()
		if closedStatuses[sum.GetStatus()] {
			if full, err := api.GetFlowSummary(ctx, &dexpb.GetFlowSummaryRequest{FlowId: sum.GetFlowId(), RunId: sum.GetRunId()}); err == nil {
				sum = full.GetSummary()
			}
		}
		indexed := map[string]json.RawMessage{}
		for _, iv := range f.GetIndexedValues() {
			if json.Valid(iv.GetJson()) {
				indexed[iv.GetKey()] = iv.GetJson()
			}
		}
		flows = append(flows, map[string]any{"summary": rawProto(sum), "indexed": indexed})
	}
	writeJSON(w, http.StatusOK, map[string]any{"flows": flows, "nextPageToken": resp.GetNextPageToken(), "query": fq.search.GetQuery()})
}

func (s *Server) getFlow(w http.ResponseWriter, r *http.Request) {
	api, ok := s.authorize(w, r, dexpb.FlowService_GetFlowState_FullMethodName)
	if !ok {
		return
	}
	if _, ok := s.authorize(w, r, dexpb.FlowService_GetHistoryEvents_FullMethodName); !ok {
		return
	}
	id, runID := r.PathValue("id"), r.URL.Query().Get("runId")
	ctx, cancel := callCtx(r)
	defer cancel()
	st, err := api.GetFlowState(ctx, &dexpb.GetFlowStateRequest{FlowId: id, RunId: runID, MaxMessagesPerChannel: maxMessages})
	if err != nil {
		writeCallError(w, err)
		return
	}
	// The history of the run the state is of, even if a newer run starts
	// meanwhile.
	runID = st.GetState().GetSummary().GetRunId()
	var events []json.RawMessage
	hreq := &dexpb.GetHistoryEventsRequest{FlowId: id, RunId: runID, PageSize: 1000}
	truncated := false
	for {
		h, err := api.GetHistoryEvents(ctx, hreq)
		if err != nil {
			writeCallError(w, err)
			return
		}
		for _, e := range h.GetEvents() {
			events = append(events, rawProto(e))
		}
		if h.GetNextPageToken() == "" {
			break
		}
		if len(events) >= maxEvents {
			truncated = true
			break
		}
		hreq.PageToken = h.GetNextPageToken()
	}
	if events == nil {
		events = []json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": rawProto(st.GetState()), "history": events, "historyTruncated": truncated,
		"names": instanceNames(st.GetState())})
}

// instanceNames maps the name of each attribute and channel of st that is
// an instance of a map (E33: "<map>/<escaped key>") to the text people
// read, as dexcli shows it: map["key"], the key unescaped and quoted. The
// run page shows that text, with the wire name as its title.
func instanceNames(st *dexpb.FlowState) map[string]string {
	names := map[string]string{}
	add := func(wire string) {
		decl, ok := engine.MapInstanceDecl(wire)
		if !ok {
			return
		}
		if key, ok := engine.UnescapeMapKey(wire[len(decl):]); ok {
			names[wire] = fmt.Sprintf("%s[%q]", decl[:len(decl)-1], key)
		}
	}
	for _, a := range st.GetAttributes() {
		add(a.GetName())
	}
	for _, c := range st.GetChannels() {
		add(c.GetChannel())
	}
	return names
}

// action decodes an action's body into in and checks the session may call
// method.
func (s *Server) action(w http.ResponseWriter, r *http.Request, method string, in any) (API, bool) {
	if !sameOrigin(w, r) {
		return nil, false
	}
	api, ok := s.authorize(w, r, method)
	if !ok {
		return nil, false
	}
	if err := decode(r, in); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return nil, false
	}
	return api, true
}

var stopTypes = map[string]dexpb.StopType{
	"cancel":    dexpb.StopType_STOP_TYPE_CANCEL,
	"terminate": dexpb.StopType_STOP_TYPE_TERMINATE,
	"fail":      dexpb.StopType_STOP_TYPE_FAIL,
}

func (s *Server) stopFlow(w http.ResponseWriter, r *http.Request) {
	var in struct {
		RunID  string `json:"runId"`
		Type   string `json:"type"`
		Reason string `json:"reason"`
	}
	api, ok := s.action(w, r, dexpb.FlowService_StopFlow_FullMethodName, &in)
	if !ok {
		return
	}
	t, ok := stopTypes[in.Type]
	if !ok {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "type: must be cancel, terminate or fail, got "+strconv.Quote(in.Type))
		return
	}
	answer(s, w, r, "stop", func(ctx context.Context) (*dexpb.StopFlowResponse, error) {
		return api.StopFlow(ctx, &dexpb.StopFlowRequest{FlowId: r.PathValue("id"), RunId: in.RunID, Type: t, Reason: in.Reason})
	}, "runId", in.RunID, "type", in.Type)
}

func (s *Server) skipTimer(w http.ResponseWriter, r *http.Request) {
	var in struct {
		RunID           string  `json:"runId"`
		StepExecutionID string  `json:"stepExecutionId"`
		ConditionID     string  `json:"conditionId"`
		TimerIndex      *uint32 `json:"timerIndex"`
	}
	api, ok := s.action(w, r, dexpb.FlowService_SkipTimer_FullMethodName, &in)
	if !ok {
		return
	}
	req := &dexpb.SkipTimerRequest{FlowId: r.PathValue("id"), RunId: in.RunID, StepExecutionId: in.StepExecutionID}
	switch {
	case in.ConditionID != "" && in.TimerIndex != nil:
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "conditionId, timerIndex: set one, not both")
		return
	case in.ConditionID != "":
		req.Timer = &dexpb.SkipTimerRequest_ConditionId{ConditionId: in.ConditionID}
	case in.TimerIndex != nil:
		req.Timer = &dexpb.SkipTimerRequest_TimerIndex{TimerIndex: *in.TimerIndex}
	}
	answer(s, w, r, "skip timer", func(ctx context.Context) (*dexpb.SkipTimerResponse, error) {
		return api.SkipTimer(ctx, req)
	}, "stepExecutionId", in.StepExecutionID)
}

// jsonValue encodes the JSON text of a form field as the value the SDKs
// read as JSON.
func jsonValue(field, text string) (*dexpb.EncodedValue, error) {
	if !json.Valid([]byte(text)) {
		return nil, status.Errorf(codes.InvalidArgument, "%s: is not JSON (a string needs quotes: \"yes\")", field)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", field, err)
	}
	return &dexpb.EncodedValue{Encoding: "json", Data: b.Bytes()}, nil
}

// valueIn is the body of a publish (name is the channel) or a set
// attribute: one JSON value.
type valueIn struct {
	RunID   string `json:"runId"`
	Channel string `json:"channel,omitempty"`
	Name    string `json:"name,omitempty"`
	Value   string `json:"value"`
}

// valueAction decodes a valueIn for method and its value.
func (s *Server) valueAction(w http.ResponseWriter, r *http.Request, method string) (API, valueIn, *dexpb.EncodedValue, bool) {
	var in valueIn
	api, ok := s.action(w, r, method, &in)
	if !ok {
		return nil, in, nil, false
	}
	v, err := jsonValue("value", in.Value)
	if err != nil {
		writeCallError(w, err)
		return nil, in, nil, false
	}
	return api, in, v, true
}

// answer makes an action's call and answers with its response, logging
// the action with who took it.
func answer[T proto.Message](s *Server, w http.ResponseWriter, r *http.Request, what string, call func(context.Context) (T, error), args ...any) {
	ctx, cancel := callCtx(r)
	defer cancel()
	resp, err := call(ctx)
	if err != nil {
		writeCallError(w, err)
		return
	}
	s.logAction(r, what, append([]any{"flowId", r.PathValue("id")}, args...)...)
	writeJSON(w, http.StatusOK, rawProto(resp))
}

func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	api, in, v, ok := s.valueAction(w, r, dexpb.FlowService_PublishToChannel_FullMethodName)
	if !ok {
		return
	}
	answer(s, w, r, "publish", func(ctx context.Context) (*dexpb.PublishToChannelResponse, error) {
		return api.PublishToChannel(ctx, &dexpb.PublishToChannelRequest{FlowId: r.PathValue("id"), RunId: in.RunID,
			Publishes: []*dexpb.ChannelPublish{{Channel: in.Channel, Values: []*dexpb.EncodedValue{v}}}})
	}, "channel", in.Channel)
}

func (s *Server) setAttribute(w http.ResponseWriter, r *http.Request) {
	api, in, v, ok := s.valueAction(w, r, dexpb.FlowService_SetAttributes_FullMethodName)
	if !ok {
		return
	}
	answer(s, w, r, "set attribute", func(ctx context.Context) (*dexpb.SetAttributesResponse, error) {
		return api.SetAttributes(ctx, &dexpb.SetAttributesRequest{FlowId: r.PathValue("id"), RunId: in.RunID,
			Attributes: []*dexpb.Attribute{{Name: in.Name, Value: v}}})
	}, "name", in.Name)
}

// resetIn is the body of a reset (E37): the run, and one point: the
// beginning, before the first execution of a step type, or before a step
// execution's WaitFor (or its Execute).
type resetIn struct {
	RunID           string `json:"runId"`
	Point           string `json:"point"` // beginning, stepType, stepExecution
	StepType        string `json:"stepType"`
	StepExecutionID string `json:"stepExecutionId"`
	BeforeExecute   bool   `json:"beforeExecute"`
	SkipReapply     bool   `json:"skipReapply"`
	Reason          string `json:"reason"`
	// RequestID, chosen by the page once per form, makes a resubmission
	// after a lost answer the same reset (E37): it is answered the run
	// the first one made.
	RequestID string `json:"requestId"`
}

// resetPoint converts the body's point.
func resetPoint(in resetIn) (*dexpb.ResetPoint, error) {
	switch in.Point {
	case "beginning":
		return &dexpb.ResetPoint{Point: &dexpb.ResetPoint_Beginning{Beginning: true}}, nil
	case "stepType":
		if in.StepType == "" {
			return nil, status.Error(codes.InvalidArgument, "stepType: must name a step type for point stepType")
		}
		return &dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepType{StepType: in.StepType}}, nil
	case "stepExecution":
		if in.StepExecutionID == "" {
			return nil, status.Error(codes.InvalidArgument, "stepExecutionId: must name a step execution for point stepExecution")
		}
		return &dexpb.ResetPoint{Point: &dexpb.ResetPoint_StepExecution{StepExecution: &dexpb.StepExecutionPoint{
			StepExecutionId: in.StepExecutionID, BeforeExecute: in.BeforeExecute}}}, nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "point: must be beginning, stepType or stepExecution, got %q", in.Point)
}

func (s *Server) resetFlow(w http.ResponseWriter, r *http.Request) {
	var in resetIn
	api, ok := s.action(w, r, dexpb.FlowService_ResetFlow_FullMethodName, &in)
	if !ok {
		return
	}
	p, err := resetPoint(in)
	if err != nil {
		writeCallError(w, err)
		return
	}
	answer(s, w, r, "reset", func(ctx context.Context) (*dexpb.ResetFlowResponse, error) {
		return api.ResetFlow(ctx, &dexpb.ResetFlowRequest{FlowId: r.PathValue("id"), RunId: in.RunID, Point: p,
			SkipReapply: in.SkipReapply, Reason: in.Reason, RequestId: in.RequestID})
	}, "runId", in.RunID, "requestId", in.RequestID, "point", in.Point, "stepType", in.StepType, "stepExecutionId", in.StepExecutionID)
}

// logAction logs an action taken in the UI, with who took it.
func (s *Server) logAction(r *http.Request, what string, args ...any) {
	_, a := s.node.API()
	who := "anonymous"
	if p, err := a.Authenticate(s.credentials(r)); err == nil && p.Identity != "" {
		who = p.Identity
	}
	s.log.Info("web UI action", append([]any{"action", what, "identity", who, "remote", r.RemoteAddr}, args...)...)
}

func (s *Server) nodeStatus(w http.ResponseWriter, r *http.Request) {
	_, a := s.node.API()
	const method = "/dex.web/NodePage"
	if _, err := a.Check(s.credentials(r), method, auth.Reader); err != nil {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "sign in with a token that has role reader: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.node.Status(r.Context()))
}
