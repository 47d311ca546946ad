package extproc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Serve serves p as the ExternalProcessor gRPC service on ln until the
// returned server is stopped (plaintext: the operator renders
// --secure-serving=false).
func Serve(ln net.Listener, p Processor) *grpc.Server {
	s := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(s, &service{p: p})
	go func() { _ = s.Serve(ln) }()
	return s
}

type service struct {
	extprocv3.UnimplementedExternalProcessorServer
	p Processor
}

// Process is one request's stream, in the EPP's order: headers are held
// until the body ends (or answered at once when they end the stream), the
// request is then answered with a headers response carrying the pick and
// the body back in streamed chunks; response headers are answered each,
// response body chunks as the Stream hands them back.
func (s *service) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	st := s.p.Open(srv.Context())
	defer st.Close()
	var headers map[string]string
	var body bytes.Buffer
	for {
		req, err := srv.Recv()
		if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
			return nil
		}
		if err != nil {
			return status.Errorf(codes.Unknown, "cannot receive stream request: %v", err)
		}
		switch v := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			headers = fromHeaderMap(v.RequestHeaders.GetHeaders())
			if v.RequestHeaders.EndOfStream {
				if err := s.request(srv, st, headers, nil); err != nil {
					return err
				}
			}
		case *extprocv3.ProcessingRequest_RequestBody:
			body.Write(v.RequestBody.Body)
			if v.RequestBody.EndOfStream {
				b := append([]byte{}, body.Bytes()...)
				body.Reset()
				if err := s.request(srv, st, headers, b); err != nil {
					return err
				}
			}
		case *extprocv3.ProcessingRequest_RequestTrailers:
			// Unused by the EPP.
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			h := fromHeaderMap(v.ResponseHeaders.GetHeaders())
			code, _ := strconv.Atoi(h[":status"])
			set, err := st.ResponseHeaders(code, h)
			if err != nil {
				return status.Errorf(codes.Unknown, "%v", err)
			}
			if err := srv.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
				ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
					HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: toOptions(set)}}}}}); err != nil {
				return err
			}
		case *extprocv3.ProcessingRequest_ResponseBody:
			out, err := st.ResponseBody(v.ResponseBody.Body, v.ResponseBody.EndOfStream)
			if err != nil {
				return status.Errorf(codes.Unknown, "%v", err)
			}
			if out == nil && !v.ResponseBody.EndOfStream {
				continue
			}
			for _, c := range chunks(out, v.ResponseBody.EndOfStream) {
				if err := srv.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
					ResponseBody: &extprocv3.BodyResponse{Response: c}}}); err != nil {
					return err
				}
			}
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			if err := srv.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
				ResponseTrailers: &extprocv3.TrailersResponse{}}}); err != nil {
				return err
			}
		}
	}
}

// request answers the request phase. An error the Stream returns ends the
// gRPC stream with it (the EPP's BuildErrResponse does so for codes it has
// no HTTP status for); Envoy then applies failure_mode_allow.
func (s *service) request(srv extprocv3.ExternalProcessor_ProcessServer, st Stream, headers map[string]string, body []byte) error {
	if headers == nil {
		headers = map[string]string{}
	}
	reply, err := st.Request(headers, body)
	if err != nil {
		return status.Errorf(codes.Unknown, "%v", err)
	}
	if im := reply.Immediate; im != nil {
		ir := &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode(im.Status)}, Body: im.Body}
		if len(im.Headers) > 0 {
			ir.Headers = &extprocv3.HeaderMutation{SetHeaders: toOptions(im.Headers)}
		}
		return srv.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: ir}})
	}
	resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
			ClearRouteCache: true,
			HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: toOptions(reply.SetHeaders)}}}}}
	if reply.Destination != "" {
		resp.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{
			DestinationNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				DestinationKey: structpb.NewStringValue(reply.Destination)}})}}
	}
	if err := srv.Send(resp); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	out := reply.Body
	if out == nil {
		out = body
	}
	for _, c := range chunks(out, true) {
		if err := srv.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: c}}}); err != nil {
			return err
		}
	}
	return nil
}

// chunks splits b into streamed body mutations of at most bodyChunk bytes,
// the last one carrying eos; an empty b is one empty mutation.
func chunks(b []byte, eos bool) []*extprocv3.CommonResponse {
	var out []*extprocv3.CommonResponse
	for {
		n := min(len(b), bodyChunk)
		last := n == len(b)
		out = append(out, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
			Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{
				Body: b[:n], EndOfStream: eos && last}}}})
		if last {
			return out
		}
		b = b[n:]
	}
}

// fromHeaderMap reads a HeaderMap as the EPP does: raw_value when set,
// value otherwise, names lower-cased by Envoy already.
func fromHeaderMap(m *corev3.HeaderMap) map[string]string {
	h := map[string]string{}
	for _, v := range m.GetHeaders() {
		if len(v.RawValue) > 0 {
			h[v.Key] = string(v.RawValue)
		} else {
			h[v.Key] = v.Value
		}
	}
	return h
}

// toHeaderMap writes h as Envoy does (raw_value), pseudo-headers first.
func toHeaderMap(h map[string]string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for _, k := range sortedKeys(h) {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(h[k])})
	}
	return m
}

func toOptions(h map[string]string) []*corev3.HeaderValueOption {
	var out []*corev3.HeaderValueOption
	for _, k := range sortedKeys(h) {
		out = append(out, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(h[k])}})
	}
	return out
}

// sortedKeys orders names with pseudo-headers (":…") first, as HTTP/2 and
// Envoy's header maps keep them.
func sortedKeys(h map[string]string) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		pi, pj := strings.HasPrefix(keys[i], ":"), strings.HasPrefix(keys[j], ":")
		if pi != pj {
			return pi
		}
		return keys[i] < keys[j]
	})
	return keys
}
