package scrape

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// maxModelsBody bounds the /v1/models answer read: a list of a few models.
const maxModelsBody = 64 << 10

// ModelName asks the upstream's OpenAI-compatible /v1/models, on the host
// of the scrape URI, for the model it serves: the id of its only model.
// It is for servers whose /metrics names no model (llama.cpp's
// llama-server); an answer with no model or several is an error that says
// to set the name by flag.
func (f *Fetcher) ModelName(ctx context.Context) (string, error) {
	u, err := url.Parse(f.uri)
	if err != nil {
		return "", err
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = "/v1/models", "", "", ""
	redacted := u.Redacted()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "vllm-normalizer")
	resp, err := f.client.Do(req)
	if err != nil {
		return "", f.classify(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s answered %s; set the model name with --upstream.model-name", redacted, resp.Status)
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsBody)).Decode(&models); err != nil {
		return "", fmt.Errorf("GET %s: not an OpenAI model list (%v); set the model name with --upstream.model-name", redacted, err)
	}
	if len(models.Data) != 1 || models.Data[0].ID == "" {
		return "", fmt.Errorf("GET %s lists %d models, want exactly one; set the model name with --upstream.model-name", redacted, len(models.Data))
	}
	return models.Data[0].ID, nil
}
