package gateway

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
)

// initialBodyCap is the buffer a request body starts in: one read holds a
// typical request (a JSON header and a few KiB of tensor data), and a
// thousand connections that announce huge bodies and send nothing hold
// only 4 MiB between them. Larger bodies double it as their bytes arrive.
const initialBodyCap = 4 << 10

// readBody reads a body of at most max bytes, answering the status and
// reason to use on failure: 413 for too large, 408 for a body that did
// not arrive within the server's read timeout, 400 for one that could not
// be read. The buffer grows with the bytes that arrive, never to the
// announced Content-Length ahead of them: a client announcing 64 MiB and
// sending one byte costs a few KiB, not 64 MiB.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, int, string, error) {
	tooBig := fmt.Errorf("request body is larger than %d bytes", max)
	if r.ContentLength > max {
		return nil, http.StatusRequestEntityTooLarge, ReasonTooLarge, tooBig
	}
	body, err := readGrowing(http.MaxBytesReader(w, r.Body, max), r.ContentLength, max)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, http.StatusRequestEntityTooLarge, ReasonTooLarge, tooBig
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, http.StatusRequestTimeout, ReasonReadTimeout, errors.New("the request body did not arrive within the gateway's read timeout")
		}
		return nil, http.StatusBadRequest, ReasonBadRequest, fmt.Errorf("reading the request body: %v", err)
	}
	return body, 0, "", nil
}

// readGrowing reads src to its end. announced is the length the sender
// announced (-1 if none) and limit the most src can yield before it fails.
// The buffer starts at initialBodyCap, or the announced length if smaller,
// and doubles only when full, up to the announced length (or the limit):
// memory follows the bytes that arrived, and a body that keeps to its
// announced length is read without a copy past its last doubling. The one
// spare byte lets a reader that reports its end on a separate read do so
// without another allocation.
func readGrowing(src io.Reader, announced, limit int64) ([]byte, error) {
	want := limit
	if limit < math.MaxInt64 {
		want++
	}
	if announced >= 0 && announced < limit {
		want = announced + 1
	}
	buf := make([]byte, 0, min(want, initialBodyCap))
	for {
		if len(buf) == cap(buf) {
			next := 2 * int64(cap(buf))
			if want > int64(len(buf)) {
				next = min(next, want)
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
