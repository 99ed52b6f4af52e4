package localcluster

import (
	"fmt"

	"github.com/etcd-conductor/etcd-conductor/tls/testpki"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const kubeconfigName = "localcluster"

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded)
// so it stays valid wherever it is copied.
func writeKubeconfig(path, server string, caPEM []byte, client testpki.KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigName] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos[kubeconfigName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: client.CertPEM,
		ClientKeyData:         client.KeyPEM,
	}
	cfg.Contexts[kubeconfigName] = &clientcmdapi.Context{
		Cluster:  kubeconfigName,
		AuthInfo: kubeconfigName,
	}
	cfg.CurrentContext = kubeconfigName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
