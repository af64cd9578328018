package console

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Role is what a user may do: look, or look and act.
type Role string

// Roles.
const (
	// RoleReadOnly sees every page and acts on nothing.
	RoleReadOnly Role = "read-only"
	// RoleOperator may also retry and skip parked outbox rows, replay dead
	// letters and resolve findings.
	RoleOperator Role = "operator"
)

// User is one console account. Hash is a bcrypt hash of the password: the
// configuration never holds a password in the clear.
type User struct {
	Name string
	Role Role
	Hash []byte
}

// Users by name.
type Users map[string]User

// ParseUsers reads users from a file: one user a line, "name role hash"
// separated by blanks; blank lines and lines starting with # are ignored.
// The hash is what `console hash-password` prints.
func ParseUsers(r io.Reader) (Users, error) {
	us := Users{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("users line %d: want \"name role bcrypt-hash\", found %d fields", n, len(f))
		}
		if err := us.add(f[0], f[1], f[2]); err != nil {
			return nil, fmt.Errorf("users line %d: %w", n, err)
		}
	}
	return us, sc.Err()
}

// ParseUsersEnv reads users from the environment's form:
// "name:role:hash,name:role:hash" (bcrypt hashes hold neither ':' nor ',').
func ParseUsersEnv(s string) (Users, error) {
	us := Users{}
	for i, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		f := strings.SplitN(item, ":", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("user %d: want name:role:bcrypt-hash", i+1)
		}
		if err := us.add(f[0], f[1], f[2]); err != nil {
			return nil, fmt.Errorf("user %d: %w", i+1, err)
		}
	}
	return us, nil
}

func (us Users) add(name, role, hash string) error {
	switch Role(role) {
	case RoleReadOnly, RoleOperator:
	default:
		return fmt.Errorf("user %q: role %q is neither %q nor %q", name, role, RoleReadOnly, RoleOperator)
	}
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		return fmt.Errorf("user %q: the password must be a bcrypt hash (console hash-password prints one): %w", name, err)
	}
	if _, dup := us[name]; dup {
		return fmt.Errorf("user %q is defined twice", name)
	}
	us[name] = User{Name: name, Role: Role(role), Hash: []byte(hash)}
	return nil
}

// HashPassword returns the bcrypt hash to put in the users configuration.
func HashPassword(password string) (string, error) {
	if len(password) < 8 {
		return "", errors.New("a password needs at least 8 characters")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	return string(h), err
}

// dummyHash is compared against when the user is unknown, so a login for an
// unknown name takes as long as one with a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("not a password of anyone"), bcrypt.DefaultCost)

// Authenticate returns the user whose name and password match.
func (us Users) Authenticate(name, password string) (User, bool) {
	u, ok := us[name]
	hash := u.Hash
	if !ok {
		hash = dummyHash
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || !ok {
		return User{}, false
	}
	return u, true
}

// Session is what the signed cookie carries.
type Session struct {
	User    string    `json:"u"`
	Role    Role      `json:"r"`
	Expires time.Time `json:"e"`
	// Nonce is random per login; the CSRF token is derived from it, so a
	// token is good for one session only.
	Nonce string `json:"n"`
}

// Session errors.
var (
	ErrNoSession      = errors.New("not logged in")
	ErrSessionExpired = errors.New("your session expired: log in again")
	ErrBadSession     = errors.New("the session cookie is not valid: log in again")
)

// Sessions signs and checks session cookies with an HMAC key: the server
// keeps no session state, and a cookie edited by hand fails its signature.
type Sessions struct {
	Key []byte
	TTL time.Duration
}

// New starts a session for u at now.
func (s Sessions) New(u User, now time.Time) (Session, string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Session{}, "", err
	}
	ss := Session{User: u.Name, Role: u.Role, Expires: now.Add(s.TTL), Nonce: base64.RawURLEncoding.EncodeToString(b[:])}
	body, err := json.Marshal(ss)
	if err != nil {
		return Session{}, "", err
	}
	enc := base64.RawURLEncoding.EncodeToString(body)
	return ss, enc + "." + s.sign("session:"+enc), nil
}

// Check verifies a cookie value and returns its session.
func (s Sessions) Check(cookie string, now time.Time) (Session, error) {
	if cookie == "" {
		return Session{}, ErrNoSession
	}
	enc, sig, ok := strings.Cut(cookie, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.sign("session:"+enc))) {
		return Session{}, ErrBadSession
	}
	body, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return Session{}, ErrBadSession
	}
	var ss Session
	if err := json.Unmarshal(body, &ss); err != nil {
		return Session{}, ErrBadSession
	}
	if !now.Before(ss.Expires) {
		return Session{}, ErrSessionExpired
	}
	return ss, nil
}

// CSRF is the token every action form of the session carries.
func (s Sessions) CSRF(ss Session) string { return s.sign("csrf:" + ss.Nonce) }

// CheckCSRF reports whether token is the session's.
func (s Sessions) CheckCSRF(ss Session, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.CSRF(ss))) == 1
}

func (s Sessions) sign(msg string) string {
	m := hmac.New(sha256.New, s.Key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// LoadUsers reads the users of the file at path (when path is not empty)
// and of env (the CONSOLE_USERS form, when not empty). A name defined in
// both is an error: which hash wins would be a guess.
func LoadUsers(path string, open func(string) (io.ReadCloser, error), env string) (Users, error) {
	us := Users{}
	if path != "" {
		f, err := open(path)
		if err != nil {
			return nil, fmt.Errorf("users file: %w", err)
		}
		defer f.Close()
		if us, err = ParseUsers(f); err != nil {
			return nil, fmt.Errorf("users file %s: %w", path, err)
		}
	}
	if env != "" {
		more, err := ParseUsersEnv(env)
		if err != nil {
			return nil, fmt.Errorf("CONSOLE_USERS: %w", err)
		}
		for name, u := range more {
			if _, dup := us[name]; dup {
				return nil, fmt.Errorf("user %q is defined in both the users file and CONSOLE_USERS", name)
			}
			us[name] = u
		}
	}
	return us, nil
}
