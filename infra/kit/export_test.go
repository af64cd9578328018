package kit

import "net/http"

// HTTPServer exposes the server's settings to the tests.
func (s *OpsServer) HTTPServer() *http.Server { return s.srv }

// HTTPServer exposes the server's settings to the tests.
func (s *APIServer) HTTPServer() *http.Server { return s.srv }
