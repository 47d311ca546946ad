package extproc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Client is Envoy's side of ext_proc: one HTTP/2 connection to the
// processor (the ext_proc cluster's http2_protocol_options), one gRPC
// stream per HTTP request.
type Client struct {
	conn           *grpc.ClientConn
	rpc            extprocv3.ExternalProcessorClient
	connectTimeout time.Duration
}

// NewClient prepares a client of addr (host:port) sending authority as
// :authority (envoy_grpc.authority); it connects on first use. A
// connectTimeout of 0 waits for the dial's own outcome.
func NewClient(addr, authority string, connectTimeout time.Duration) (*Client, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if authority != "" {
		opts = append(opts, grpc.WithAuthority(authority))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, rpc: extprocv3.NewExternalProcessorClient(conn), connectTimeout: connectTimeout}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// ready connects if need be. Envoy tries a fresh connection for each
// request while none is up, within the cluster's connect_timeout; gRPC's
// reconnect backoff would instead fail requests fast for up to minutes
// after one refused dial, so the backoff is reset whenever a request finds
// the connection down.
func (c *Client) ready(ctx context.Context) bool {
	if c.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.connectTimeout)
		defer cancel()
	}
	tried := false
	for {
		s := c.conn.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.Shutdown:
			return false
		case connectivity.Idle:
			c.conn.Connect()
		case connectivity.Connecting:
			tried = true
		case connectivity.TransientFailure:
			if tried {
				return false
			}
			tried = true
			c.conn.ResetConnectBackoff()
		}
		if !c.conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
}

// Open starts one request's stream. Its error is a gRPC status:
// Unavailable (14) when nothing accepts the connection.
func (c *Client) Open(ctx context.Context) (*ClientStream, error) {
	if !c.ready(ctx) {
		return nil, status.Error(codes.Unavailable, "ext_proc: connection failure")
	}
	ctx, cancel := context.WithCancel(ctx)
	s, err := c.rpc.Process(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &ClientStream{s: s, cancel: cancel}, nil
}

// ClientStream is one HTTP request's ext_proc stream.
type ClientStream struct {
	s      extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
}

// Close ends the stream: a reset the server sees as Canceled, as Envoy's
// stream ends when its HTTP request does.
func (s *ClientStream) Close() { s.cancel() }

// Request sends the request headers (end of stream when body is nil) and
// the body in chunks, then reads the EPP's answer: an immediate response,
// or the headers response (SetHeaders: what it sets) followed by the
// streamed body until its end of stream.
func (s *ClientStream) Request(headers map[string]string, body []byte) (RequestReply, error) {
	if err := s.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: toHeaderMap(headers), EndOfStream: body == nil}}}); err != nil {
		return RequestReply{}, s.recvErr(err)
	}
	if body != nil {
		for off := 0; ; off += bodyChunk {
			end := min(off+bodyChunk, len(body))
			if err := s.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
				RequestBody: &extprocv3.HttpBody{Body: body[off:end], EndOfStream: end == len(body)}}}); err != nil {
				return RequestReply{}, s.recvErr(err)
			}
			if end == len(body) {
				break
			}
		}
	}
	var reply RequestReply
	gotHeaders := false
	for {
		resp, err := s.s.Recv()
		if err != nil {
			return RequestReply{}, err
		}
		if md := resp.GetDynamicMetadata().GetFields()[DestinationNamespace].GetStructValue(); md != nil {
			reply.Destination = md.GetFields()[DestinationKey].GetStringValue()
		}
		switch v := resp.Response.(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			ir := v.ImmediateResponse
			im := &Immediate{Status: int(ir.GetStatus().GetCode()), Body: ir.Body, Headers: map[string]string{}}
			for _, o := range ir.GetHeaders().GetSetHeaders() {
				im.Headers[strings.ToLower(o.GetHeader().GetKey())] = headerValue(o)
			}
			return RequestReply{Immediate: im}, nil
		case *extprocv3.ProcessingResponse_RequestHeaders:
			if gotHeaders {
				return RequestReply{}, errors.New("ext_proc: spurious message")
			}
			gotHeaders = true
			reply.SetHeaders = map[string]string{}
			for _, o := range v.RequestHeaders.GetResponse().GetHeaderMutation().GetSetHeaders() {
				reply.SetHeaders[strings.ToLower(o.GetHeader().GetKey())] = headerValue(o)
			}
			if body == nil {
				return reply, nil
			}
		case *extprocv3.ProcessingResponse_RequestBody:
			// Full duplex: the header response comes before the body's.
			if !gotHeaders {
				return RequestReply{}, errors.New("ext_proc: spurious message")
			}
			sb := v.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if reply.Body == nil {
				reply.Body = []byte{}
			}
			reply.Body = append(reply.Body, sb.GetBody()...)
			if sb.GetEndOfStream() {
				return reply, nil
			}
		default:
			return RequestReply{}, fmt.Errorf("ext_proc: spurious message %T in the request phase", v)
		}
	}
}

// ResponseHeaders sends the upstream status (":status") and headers and
// returns the headers the EPP sets.
func (s *ClientStream) ResponseHeaders(code int, headers map[string]string) (map[string]string, error) {
	h := map[string]string{":status": strconv.Itoa(code)}
	for k, v := range headers {
		h[k] = v
	}
	if err := s.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: toHeaderMap(h)}}}); err != nil {
		return nil, s.recvErr(err)
	}
	resp, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	rh, ok := resp.Response.(*extprocv3.ProcessingResponse_ResponseHeaders)
	if !ok {
		return nil, fmt.Errorf("ext_proc: spurious message %T for response headers", resp.Response)
	}
	set := map[string]string{}
	for _, o := range rh.ResponseHeaders.GetResponse().GetHeaderMutation().GetSetHeaders() {
		set[strings.ToLower(o.GetHeader().GetKey())] = headerValue(o)
	}
	return set, nil
}

// SendResponseBody sends one upstream body chunk. Full duplex: the answer
// comes from RecvResponseBody, in the server's own time. It may run beside
// RecvResponseBody (one sender, one receiver), so a failure is returned as
// it is, the reason left to the receiver.
func (s *ClientStream) SendResponseBody(chunk []byte, eos bool) error {
	return s.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: chunk, EndOfStream: eos}}})
}

// RecvResponseBody returns the next body chunk the EPP streams back and
// whether it ends the response.
func (s *ClientStream) RecvResponseBody() ([]byte, bool, error) {
	for {
		resp, err := s.s.Recv()
		if err != nil {
			return nil, false, err
		}
		switch v := resp.Response.(type) {
		case *extprocv3.ProcessingResponse_ResponseBody:
			sb := v.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			return sb.GetBody(), sb.GetEndOfStream(), nil
		case *extprocv3.ProcessingResponse_ResponseTrailers:
			continue
		default:
			return nil, false, fmt.Errorf("ext_proc: spurious message %T for the response body", v)
		}
	}
}

// recvErr turns a failed Send into the stream's status: gRPC reports io.EOF
// on Send and the reason on the next Recv.
func (s *ClientStream) recvErr(err error) error {
	if _, rerr := s.s.Recv(); rerr != nil {
		return rerr
	}
	return err
}

// headerValue reads a mutation's value: raw_value when set, value
// otherwise, as Envoy does.
func headerValue(o *corev3.HeaderValueOption) string {
	if h := o.GetHeader(); len(h.GetRawValue()) > 0 {
		return string(h.GetRawValue())
	}
	return o.GetHeader().GetValue()
}
