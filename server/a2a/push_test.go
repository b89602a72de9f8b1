package a2a

import (
	"strings"
	"testing"
)

// TestPushAuthLimited: a push config's headers are what A2A defines,
// bounded: a registered scheme whose credentials are one token68, and a
// printable token.
func TestPushAuthLimited(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  TaskPushNotificationConfig
		want string // "" allowed, else in the error
	}{
		{"none", TaskPushNotificationConfig{}, ""},
		{"a token", TaskPushNotificationConfig{Token: "tok-123"}, ""},
		{"Bearer", TaskPushNotificationConfig{Authentication: &AuthenticationInfo{Scheme: "bearer", Credentials: "abc.def-ghi_~+/=="}}, ""},
		{"Basic", TaskPushNotificationConfig{Authentication: &AuthenticationInfo{Scheme: "Basic", Credentials: "dXNlcjpwYXNz"}}, ""},
		{"an unregistered scheme", TaskPushNotificationConfig{Authentication: &AuthenticationInfo{Scheme: "X-Api-Key:", Credentials: "k"}}, "not one of"},
		{"Digest's parameters", TaskPushNotificationConfig{Authentication: &AuthenticationInfo{Scheme: "Digest", Credentials: "username=a"}}, "not one of"},
		{"credentials with a space", TaskPushNotificationConfig{Authentication: &AuthenticationInfo{Scheme: "Bearer", Credentials: "a b"}}, "token68"},
		{"credentials with a line break", TaskPushNotificationConfig{Authentication: &AuthenticationInfo{Scheme: "Bearer", Credentials: "a\r\nX-Evil: 1"}}, "token68"},
		{"a scheme without credentials", TaskPushNotificationConfig{Authentication: &AuthenticationInfo{Scheme: "Bearer"}}, "required"},
		{"huge credentials", TaskPushNotificationConfig{Authentication: &AuthenticationInfo{Scheme: "Bearer", Credentials: strings.Repeat("a", 5000)}}, "at most"},
		{"a token with a line break", TaskPushNotificationConfig{Token: "t\nX-Evil: 1"}, "printable"},
		{"a huge token", TaskPushNotificationConfig{Token: strings.Repeat("t", 2000)}, "at most"},
	} {
		err := checkPushAuth(tc.cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}
