package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dexzd/dexzd/internal/blob"
)

// apiErr builds the error chain the SDK returns for an HTTP answer with an
// S3 error code.
func apiErr(status int, apiErr error) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: "PutObject",
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
				Err:      apiErr,
			},
			RequestID: "test",
		},
	}
}

func code(c string) error { return &smithy.GenericAPIError{Code: c, Message: "synthetic"} }

// sendErr builds the error chain for a request that got no answer.
func sendErr(cause error) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: "PutObject",
		Err:           &smithyhttp.RequestSendError{Err: cause},
	}
}

func TestKindOf_Table(t *testing.T) {
	t.Parallel()
	get, absent, match, list, del := blob.OpGet, blob.OpPutIfAbsent, blob.OpPutIfMatch, blob.OpList, blob.OpDelete
	cases := []struct {
		name string
		op   string
		err  error
		want error
	}{
		{"get 404 NoSuchKey", get, apiErr(404, &types.NoSuchKey{}), blob.ErrNotFound},
		{"get 404 bare", get, apiErr(404, code("NotFound")), blob.ErrNotFound},
		{"delete 404", del, apiErr(404, &types.NoSuchKey{}), blob.ErrNotFound},
		{"put-if-match 404", match, apiErr(404, &types.NoSuchKey{}), blob.ErrPrecondition},
		{"put-if-match 412", match, apiErr(412, code("PreconditionFailed")), blob.ErrPrecondition},
		{"put-if-absent 412", absent, apiErr(412, code("PreconditionFailed")), blob.ErrPrecondition},
		{"put-if-absent 404", absent, apiErr(404, code("NoSuchKey")), blob.ErrPermanent},
		{"get 412", get, apiErr(412, code("PreconditionFailed")), blob.ErrPermanent},
		{"get NoSuchBucket", get, apiErr(404, &types.NoSuchBucket{}), blob.ErrPermanent},
		{"put-if-match NoSuchBucket", match, apiErr(404, code("NoSuchBucket")), blob.ErrPermanent},
		{"delete NoSuchBucket", del, apiErr(404, code("NoSuchBucket")), blob.ErrPermanent},
		{"list NoSuchBucket", list, apiErr(404, code("NoSuchBucket")), blob.ErrPermanent},
		{"409 ConditionalRequestConflict", absent, apiErr(409, code("ConditionalRequestConflict")), blob.ErrTransient},
		{"409 other", match, apiErr(409, code("OperationAborted")), blob.ErrTransient},
		{"500 InternalError", get, apiErr(500, code("InternalError")), blob.ErrTransient},
		{"502 no code", get, apiErr(502, code("")), blob.ErrTransient},
		{"503 SlowDown", absent, apiErr(503, code("SlowDown")), blob.ErrTransient},
		{"503 ServiceUnavailable", list, apiErr(503, code("ServiceUnavailable")), blob.ErrTransient},
		{"429", match, apiErr(429, code("TooManyRequests")), blob.ErrTransient},
		{"400 RequestTimeout", absent, apiErr(400, code("RequestTimeout")), blob.ErrTransient},
		{"403 RequestTimeTooSkewed", get, apiErr(403, code("RequestTimeTooSkewed")), blob.ErrTransient},
		{"403 AccessDenied", get, apiErr(403, code("AccessDenied")), blob.ErrPermanent},
		{"403 InvalidAccessKeyId", list, apiErr(403, code("InvalidAccessKeyId")), blob.ErrPermanent},
		{"403 SignatureDoesNotMatch", absent, apiErr(403, code("SignatureDoesNotMatch")), blob.ErrPermanent},
		{"400 InvalidArgument", absent, apiErr(400, code("InvalidArgument")), blob.ErrPermanent},
		{"400 EntityTooLarge", absent, apiErr(400, code("EntityTooLarge")), blob.ErrPermanent},
		{"405", del, apiErr(405, code("MethodNotAllowed")), blob.ErrPermanent},
		{"connection refused", get, sendErr(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), blob.ErrTransient},
		{"connection reset", absent, sendErr(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), blob.ErrTransient},
		{"deadline", match, sendErr(context.DeadlineExceeded), blob.ErrTransient},
		{"cancelled", list, fmt.Errorf("wrapped: %w", context.Canceled), blob.ErrTransient},
		{"unknown", del, errors.New("something else"), blob.ErrTransient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := kindOf(c.op, c.err); got != c.want {
				t.Fatalf("kindOf(%s, %v) = %v, want %v", c.op, c.err, got, c.want)
			}
			err := classify(c.op, "k", c.err)
			if blob.Classify(err) != c.want || !errors.Is(err, c.want) {
				t.Fatalf("classify(%s, %v) = %v, want one matching %v", c.op, c.err, err, c.want)
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("classify(%s, %v) = %v, which does not wrap the cause", c.op, c.err, err)
			}
		})
	}
}
