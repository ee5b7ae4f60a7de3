package zkwire

import (
	"errors"
	"reflect"
	"testing"
)

// The fuzz targets check that no input makes a decoder panic or allocate
// beyond the input's size, and that whatever decodes encodes back to bytes
// that decode to the same value.
//
//	go test ./zkwire -run XXX -fuzz FuzzDecodeRequest -fuzztime 1m

func FuzzDecodeRequest(f *testing.F) {
	for _, r := range requestSamples() {
		f.Add(AppendRequest(nil, &r)[4:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Request
		err := DecodeRequest(body, &r)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownOp) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		var again Request
		if err := DecodeRequest(AppendRequest(nil, &r)[4:], &again); err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip changed the request\n got %+v\nwant %+v", again, r)
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	for op, r := range replySamples() {
		f.Add(int32(op), AppendReply(nil, op, &r)[4:])
	}
	f.Fuzz(func(t *testing.T, op int32, body []byte) {
		var r Reply
		if err := DecodeReply(body, Op(op), &r); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		var again Reply
		if err := DecodeReply(AppendReply(nil, Op(op), &r)[4:], Op(op), &again); err != nil {
			t.Fatalf("re-encoded reply does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip changed the reply\n got %+v\nwant %+v", again, r)
		}
	})
}

func FuzzDecodeConnectRequest(f *testing.F) {
	f.Add(AppendConnectRequest(nil, &ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)})[4:])
	f.Add(AppendConnectRequest(nil, &ConnectRequest{SessionID: 7, Passwd: []byte{1}, HasReadOnly: true})[4:])
	f.Fuzz(func(t *testing.T, body []byte) {
		var m ConnectRequest
		if err := DecodeConnectRequest(body, &m); err != nil {
			return
		}
		var again ConnectRequest
		if err := DecodeConnectRequest(AppendConnectRequest(nil, &m)[4:], &again); err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, m)
		}
	})
}

func FuzzDecodeConnectResponse(f *testing.F) {
	f.Add(AppendConnectResponse(nil, &ConnectResponse{TimeOut: 30000, SessionID: 1, Passwd: make([]byte, 16)})[4:])
	f.Add(AppendConnectResponse(nil, &ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: true})[4:])
	f.Fuzz(func(t *testing.T, body []byte) {
		var m ConnectResponse
		if err := DecodeConnectResponse(body, &m); err != nil {
			return
		}
		var again ConnectResponse
		if err := DecodeConnectResponse(AppendConnectResponse(nil, &m)[4:], &again); err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, m)
		}
	})
}
