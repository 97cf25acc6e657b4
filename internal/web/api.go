package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dexzd/dexzd/api/dexpb"
	"github.com/dexzd/dexzd/internal/auth"
)

// Bounds of one request of the UI.
const (
	// maxScan is how many runs one flows request with an ID prefix reads
	// at most (the prefix is matched here until tier 2's search exists).
	maxScan = 10_000
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

// listQuery reads the flows page's filters.
func listQuery(r *http.Request, now time.Time) (*dexpb.ListFlowsRequest, string, error) {
	q := r.URL.Query()
	req := &dexpb.ListFlowsRequest{FlowType: q.Get("type"), PageToken: q.Get("pageToken")}
	if s := q.Get("status"); s != "" {
		for _, name := range strings.Split(s, ",") {
			v, ok := dexpb.FlowStatus_value["FLOW_STATUS_"+strings.ToUpper(strings.TrimSpace(name))]
			if !ok || v == 0 {
				return nil, "", status.Errorf(codes.InvalidArgument, "status: %q is not running, completed, failed, canceled or terminated", name)
			}
			req.Statuses = append(req.Statuses, dexpb.FlowStatus(v))
		}
	}
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			d, derr := time.ParseDuration(s)
			if derr != nil || d < 0 {
				return nil, "", status.Errorf(codes.InvalidArgument, "since: %q is neither an RFC 3339 time nor a duration such as 1h", s)
			}
			t = now.Add(-d)
		}
		req.StartTimeFrom = timestamppb.New(t)
	}
	req.PageSize = 50
	if s := q.Get("pageSize"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return nil, "", status.Errorf(codes.InvalidArgument, "pageSize: must be 1 to 1000, got %q", s)
		}
		req.PageSize = uint32(n)
	}
	return req, q.Get("prefix"), nil
}

func (s *Server) listFlows(w http.ResponseWriter, r *http.Request) {
	api, ok := s.authorize(w, r, dexpb.FlowService_ListFlows_FullMethodName)
	if !ok {
		return
	}
	req, prefix, err := listQuery(r, time.Now())
	if err != nil {
		writeCallError(w, err)
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	var flows []json.RawMessage
	scanned := 0
	next := ""
	for {
		resp, err := api.ListFlows(ctx, req)
		if err != nil {
			writeCallError(w, err)
			return
		}
		for _, f := range resp.GetFlows() {
			if strings.HasPrefix(f.GetFlowId(), prefix) {
				flows = append(flows, rawProto(f))
			}
		}
		scanned += len(resp.GetFlows())
		next = resp.GetNextPageToken()
		if prefix == "" || next == "" || len(flows) >= int(req.PageSize) || scanned >= maxScan {
			break
		}
		req.PageToken = next
	}
	if flows == nil {
		flows = []json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"flows": flows, "nextPageToken": next, "scanned": scanned})
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
	writeJSON(w, http.StatusOK, map[string]any{"state": rawProto(st.GetState()), "history": events, "historyTruncated": truncated})
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
