package server

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPIDoc is the API's OpenAPI 3.1 document. docs/openapi.json is a copy
// of it (a test keeps them identical), because go:embed cannot reach docs/.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI document the server serves at /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

func (s *Server) openapi(c *gin.Context) {
	c.Data(http.StatusOK, "application/json", openAPIDoc)
}
