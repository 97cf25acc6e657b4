package s3

import (
	"context"
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/dexzd/dexzd/internal/blob"
)

// Error codes that decide a class on their own, whatever the status.
var (
	// permanentCodes are answers a retry cannot change.
	permanentCodes = map[string]bool{
		"NoSuchBucket":          true,
		"AccessDenied":          true,
		"InvalidAccessKeyId":    true,
		"SignatureDoesNotMatch": true,
		"InvalidBucketName":     true,
		"AllAccessDisabled":     true,
	}
	// transientCodes are answers a retry may change, including some that S3
	// sends with a 4xx status.
	transientCodes = map[string]bool{
		"ConditionalRequestConflict": true, // 409: a concurrent conditional write
		"OperationAborted":           true, // 409: a conflicting operation is in progress
		"SlowDown":                   true,
		"Throttling":                 true,
		"ThrottlingException":        true,
		"RequestLimitExceeded":       true,
		"TooManyRequests":            true,
		"RequestTimeout":             true, // 400: the connection idled mid-request
		"RequestTimeTooSkewed":       true, // 403: the SDK corrects its clock offset from the reply
		"IncompleteBody":             true, // 400: the body was cut short in transit
		"InternalError":              true,
		"ServiceUnavailable":         true,
		"XMinioServerNotInitialized": true,
	}
)

// classify maps an SDK error to a blob error for op on key.
//
//   - context cancellation or deadline, and failures with no HTTP answer
//     (connection refused or reset, timeouts, DNS): transient;
//   - NoSuchBucket, AccessDenied, bad credentials, and an endpoint's TLS
//     certificate that does not verify (storage.s3.caFile): permanent;
//   - 404 (NoSuchKey, NotFound): not found for get and delete (Delete treats
//     it as success), precondition for put-if-match (S3 answers 404 or 412
//     when the key is missing), permanent otherwise;
//   - 412 PreconditionFailed: precondition for the conditional writes;
//   - 409 (ConditionalRequestConflict), 408, 429, 5xx and the throttling
//     codes: transient;
//   - any other 4xx: permanent;
//   - anything else: transient.
func classify(op, key string, err error) error {
	return blob.Wrap(op, key, kindOf(op, err), err)
}

// kindOf returns the blob sentinel err belongs to when it happened during op.
func kindOf(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return blob.ErrTransient
	}
	if blob.IsCertificateError(err) {
		return blob.ErrPermanent
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	conditional := op == blob.OpPutIfAbsent || op == blob.OpPutIfMatch

	switch {
	case permanentCodes[code]:
		return blob.ErrPermanent
	case transientCodes[code]:
		return blob.ErrTransient
	case status == http.StatusNotFound || code == "NoSuchKey" || code == "NotFound":
		switch op {
		case blob.OpGet, blob.OpDelete:
			return blob.ErrNotFound
		case blob.OpPutIfMatch:
			return blob.ErrPrecondition
		}
		return blob.ErrPermanent
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
		if conditional {
			return blob.ErrPrecondition
		}
		return blob.ErrPermanent
	case status == http.StatusConflict,
		status == http.StatusRequestTimeout,
		status == http.StatusTooManyRequests,
		status >= 500:
		return blob.ErrTransient
	case status >= 400:
		return blob.ErrPermanent
	}
	// No HTTP answer: the request may or may not have reached the server.
	return blob.ErrTransient
}
